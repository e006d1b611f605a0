"""The pce toolset (seed 000): claims, boundary-first retrieval, policies, redaction."""
