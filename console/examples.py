"""Ready-to-paste snippets for a new key, written for this server's own address."""

from dataclasses import dataclass

from keys.models import Generation

CURRENT_PATH = "/api/v1/inbound/api-message"
LEGACY_PATH = "/api/v1/inbound-sms/webhook"


@dataclass(frozen=True, slots=True)
class Example:
    slug: str
    title: str
    language: str
    code: str


def _curl(url: str, variable: str, secret: str, body: str) -> str:
    """Keep the secret in an environment variable, then POST ``body`` (JSON) with it."""
    return (
        f"export {variable}='{secret}'\n"
        "\n"
        f"curl -X POST {url} \\\n"
        f'  -H "Authorization: Bearer ${variable}" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d '{body}'"
    )


def _python(api_base: str, plaintext: str) -> str:
    # base_url passed explicitly: without it (and without POKE_API) the SDK sends the key to its vendor's server.
    return (
        "# pip install poke\n"
        f"# export POKE_API_KEY='{plaintext}'\n"
        "import os\n"
        "\n"
        "from poke import Poke\n"
        "\n"
        f'poke = Poke(api_key=os.environ["POKE_API_KEY"], base_url="{api_base}")\n'
        'print(poke.send_message("Remind me to review the pull requests at 4pm"))'
    )


def _github_actions(url: str) -> str:
    # ${{ … }} is GitHub's expression syntax; the key lives in the repository's secrets, never in the workflow.
    return (
        "# Settings → Secrets and variables → Actions → New repository secret: POKE_API_KEY\n"
        "- name: Tell my assistant the deploy finished\n"
        "  env:\n"
        "    POKE_API_KEY: ${{ secrets.POKE_API_KEY }}\n"
        "  run: |\n"
        f"    curl --fail-with-body -sS -X POST {url} \\\n"
        '      -H "Authorization: Bearer $POKE_API_KEY" \\\n'
        '      -H "Content-Type: application/json" \\\n'
        '      -d "{\\"message\\": \\"Deployed $GITHUB_REPOSITORY at $GITHUB_SHA\\"}"'
    )


def for_new_key(base_url: str, plaintext: str, generation: str) -> list[Example]:
    """base_url: scheme and host of this server as the browser reached it, without a trailing slash."""
    if generation == Generation.V1:
        legacy = _curl(base_url + LEGACY_PATH, "POKE_API_KEY", plaintext, '{"message": "Hello"}')
        return [Example("curl", "curl (legacy endpoint)", "shell", legacy)]
    url = base_url + CURRENT_PATH
    curl = _curl(url, "POKE_API_KEY", plaintext, '{"message": "Remind me to stretch at 3pm"}')
    return [
        Example("curl", "curl", "shell", curl),
        Example("python", "Python (poke SDK)", "python", _python(base_url + "/api/v1", plaintext)),
        Example("github-actions", "GitHub Actions step", "yaml", _github_actions(url)),
    ]


def _trigger_github(url: str, secret: str | None) -> str:
    if secret is None:
        return (
            "# GitHub cannot send an Authorization header. Make a webhook with\n"
            "# “Also accept signed requests (GitHub)” ticked, then in the repository:\n"
            "# Settings → Webhooks → Add webhook\n"
            f"#   Payload URL:  {url}\n"
            "#   Content type: application/json\n"
            "#   Secret:       the pws_… signing secret shown with it"
        )
    return (
        "# In the repository: Settings → Webhooks → Add webhook\n"
        f"Payload URL:  {url}\n"
        "Content type: application/json\n"
        f"Secret:       {secret}\n"
        "# GitHub signs each delivery (X-Hub-Signature-256); pushes, pull requests, issues and\n"
        "# workflow runs get a one-line summary in the message."
    )


def _trigger_alertmanager(url: str) -> str:
    return (
        "# alertmanager.yml: the token in a file next to it, e.g. /etc/alertmanager/poke-token\n"
        "receivers:\n"
        "  - name: my-assistant\n"
        "    webhook_configs:\n"
        f"      - url: {url}\n"
        "        http_config:\n"
        "          authorization:\n"
        "            type: Bearer\n"
        "            credentials_file: /etc/alertmanager/poke-token"
    )


def for_new_trigger(url: str, token: str, signing_secret: str | None) -> list[Example]:
    """How to fire a new webhook trigger: curl, a GitHub repository webhook, Prometheus Alertmanager."""
    curl = _curl(url, "POKE_WEBHOOK_TOKEN", token, '{"order": 1042, "customer": "Sam", "total": "38.50"}')
    return [
        Example("curl", "curl", "shell", curl),
        Example("github", "GitHub repository webhook", "text", _trigger_github(url, signing_secret)),
        Example("alertmanager", "Prometheus Alertmanager", "yaml", _trigger_alertmanager(url)),
    ]
