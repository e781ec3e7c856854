"""Benchmark-only settings: the service's own settings plus the baseline route.

Only `make bench` uses this module (through DJANGO_SETTINGS_MODULE), so production has no baseline route.
"""

from config.env import env_int
from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"

# The row the baseline view inserts belongs to this conversation and key, like the service's own rows do.
BENCH_CONVERSATION_ID = env_int("BENCH_CONVERSATION_ID", 0)
BENCH_API_KEY_ID = env_int("BENCH_API_KEY_ID", 0)
