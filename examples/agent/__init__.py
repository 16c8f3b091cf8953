"""A small support agent whose requests are assembled in code (see support.py)."""
