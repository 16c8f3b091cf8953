"""needle-action: token budgets and positional recall checks for prompt templates."""

__version__ = "0.1.0"
