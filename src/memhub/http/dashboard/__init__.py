"""The web dashboard: pages at / and /ui/ on the HTTP listener (app.py), templates and static files."""
