"""lockguard: find abandoned Redis locks and release them safely."""

__version__ = "0.1.0"
