"""Services: one package per toolset, each holding its seed's models, rules and error vocabulary."""
