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


def _curl(url: str, plaintext: str, message: str) -> str:
    return (
        f"export POKE_API_KEY='{plaintext}'\n"
        "\n"
        f"curl -X POST {url} \\\n"
        '  -H "Authorization: Bearer $POKE_API_KEY" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f'  -d \'{{"message": "{message}"}}\''
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
        return [
            Example("curl", "curl (legacy endpoint)", "shell", _curl(base_url + LEGACY_PATH, plaintext, "Hello")),
        ]
    url = base_url + CURRENT_PATH
    return [
        Example("curl", "curl", "shell", _curl(url, plaintext, "Remind me to stretch at 3pm")),
        Example("python", "Python (poke SDK)", "python", _python(base_url + "/api/v1", plaintext)),
        Example("github-actions", "GitHub Actions step", "yaml", _github_actions(url)),
    ]
