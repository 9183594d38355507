"""Production settings, as a team would deploy them: no debug pages, and only the
site's own host name is served (every other Host header is a 400, Django's
DisallowedHost)."""

SECRET_KEY = "stackrace-test-fixture-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["myapp.example.com"]
ROOT_URLCONF = "prodsite.urls"
INSTALLED_APPS: list[str] = []
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
# quiet: a rejected Host is logged as an error by default, once per request
LOGGING = {"version": 1, "disable_existing_loggers": True}
