"""Seed 000 policies: schema, safe YAML parsing, boundary rules, redaction, signatures."""
