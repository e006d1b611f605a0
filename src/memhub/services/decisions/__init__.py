"""Seed 002: decision records with supersede chains, graph-first search, reviewed proposals."""
