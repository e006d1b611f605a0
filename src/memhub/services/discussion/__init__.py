"""Seed 004 (discussion memory): projects, topic trees, logs and decisions."""
