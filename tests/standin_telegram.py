"""Try the Telegram channel on your machine without a Telegram account: a stand-in for Telegram's Bot API on
127.0.0.1 (the one the tests use, tests/providers.py) that prints what the bot sends and posts what you type to the
server as a message from your chat, signed the way Telegram signs it.

    .venv/bin/python -m tests.standin_telegram --port 8099 --server http://127.0.0.1:8000

It prints the settings to start the server with; docs/howto/link-a-phone.md walks through it."""

import argparse
import itertools
import socket
import sys
import threading
import time

from tests import providers

CHAT_ID = 4242


def settings_line(port: int) -> str:
    return (
        f"TELEGRAM_BOT_TOKEN='{providers.TELEGRAM_BOT_TOKEN}' TELEGRAM_BOT_USERNAME={providers.TELEGRAM_BOT_USERNAME} "
        f"TELEGRAM_WEBHOOK_SECRET={providers.TELEGRAM_WEBHOOK_SECRET} TELEGRAM_API_BASE_URL=http://127.0.0.1:{port}"
    )


def print_what_the_bot_sends(bot: providers.FakeTelegram, stop: threading.Event) -> None:
    for index in itertools.count():
        while len(bot.sent) <= index:
            if stop.wait(0.2):
                return
        print(f"\nbot → chat {bot.sent[index].address}: {bot.sent[index].text}\nyou> ", end="", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8099, help="where the stand-in Bot API listens")
    parser.add_argument("--server", default="http://127.0.0.1:8000", help="the service that receives your messages")
    options = parser.parse_args()

    bot = providers.FakeTelegram()
    bot.server_close()  # FakeTelegram binds a free port; this one listens where the settings say
    bot.socket = socket.socket(bot.address_family, bot.socket_type)
    bot.server_address = ("127.0.0.1", options.port)
    bot.server_bind()
    bot.server_activate()
    threading.Thread(target=bot.serve_forever, daemon=True).start()
    stop = threading.Event()
    threading.Thread(target=print_what_the_bot_sends, args=(bot, stop), daemon=True).start()

    print(f"Stand-in Telegram Bot API on http://127.0.0.1:{options.port}. Start the service with:\n")
    print(f"  {settings_line(options.port)} make run\n")
    print("Then, in the console: Settings → Channels → Make a Telegram link, and type here /start <the link's token>.")
    print("Every other line you type is a message from your Telegram chat. Ctrl-D stops.\n")
    try:
        for line in iter(lambda: input("you> "), None):
            if not line.strip():
                continue
            status, body = bot.inbound(CHAT_ID, line.strip()).post(options.server)
            print(f"  (the service answered {status}: {body.decode(errors='replace')[:200]})")
            time.sleep(0.1)
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        stop.set()
        bot.shutdown()
        bot.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
