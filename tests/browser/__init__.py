import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_REASON = "browser tests need Chromium: apt-get install -y chromium (.ci/run installs it)"
