"""Seed 003 (associative memory): memories in domains, associations, projects, users, sessions,
visualisation and administration."""
