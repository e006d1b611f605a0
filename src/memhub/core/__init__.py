"""Core: models, errors, clock, text and hashing helpers. Imports nothing above it."""
