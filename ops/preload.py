"""Everything a process's threads import, imported once by its main thread before the second thread starts.

Two threads importing the same package for the first time at the same moment can each see it half-initialised when
the package imports itself in a circle (Authlib, the MCP SDK): one gets ``ImportError: cannot import name ... from
partially initialized module``. It happened to ``make run`` about one start in eight, when Django's autoreloader
thread imported the URLconf while the serving thread imported the same packages, and to a delivery attempt racing
housekeeping at a worker's start. So every entry point calls ``import_before_threads`` first, in its main thread:
``manage.py serve`` and ``manage.py worker`` (delivery/management/commands/) and gunicorn's workers
(gunicorn.conf.py, ``post_worker_init``). The list of what is imported on first use is the
setting ``IMPORTED_ON_FIRST_USE`` (config/settings.py: the wiring floor may name every app); tests/test_preload.py
checks that it covers every import the app's code makes inside a function."""

import importlib

from django.conf import settings


def import_before_threads() -> None:
    """Import the URLconf (and through it every view, the console, the API, the channels' callbacks) and the modules
    imported on first use. Call it after ``django.setup()`` and before starting any thread."""
    for name in (settings.ROOT_URLCONF, *settings.IMPORTED_ON_FIRST_USE):
        importlib.import_module(name)
