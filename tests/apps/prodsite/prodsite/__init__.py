"""A Django project set as for production (DEBUG off, one allowed host), the way a team
runs its own app: tests/hardening/test_production_app.py races it with the Host header
it expects, under gunicorn and uWSGI."""
