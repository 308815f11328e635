"""Transformer attention explorer: ``python app.py`` serves it at http://127.0.0.1:7860 (the Space's entry point)."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
from pathlib import Path

# Started as a program, no garbage collection until the page is built: the libraries and the page make objects that
# live as long as the server, and each full collection among them took 0.15 s, several times over a start-up. main()
# then freezes them (later collections skip them) and turns collection back on.
if __name__ == "__main__":
    gc.disable()

import ui  # noqa: F401, E402  (sets gradio's analytics off before gradio loads)
from transformer import cpu  # noqa: E402

# What the other processes had spent before Gradio and the app's own modules are imported: the cores they keep busy
# are counted over those imports (half a second or more), rather than over a wait of their own (threads_for_machine).
OTHERS_BEFORE_IMPORTS = cpu.others_use()

from ui.build import build_app, launch_options  # noqa: E402
from ui.hub_models import OpeningAtStart  # noqa: E402
from ui.runtime import costly, settings  # noqa: E402
from ui.services import Services  # noqa: E402


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
            return True
        except OSError:
            return False


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for chatty in ("kaleido", "choreographer"):  # a dozen INFO lines about their own browser per exported image
        logging.getLogger(chatty).setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description="Transformer attention explorer")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (GRADIO_SERVER_NAME, set by Hugging Face Spaces, wins when set)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)),
                        help="port to listen on (default 7860, or GRADIO_SERVER_PORT; 0: any free port)")
    parser.add_argument("--share", action="store_true", help="also open a temporary public gradio.live link")
    parser.add_argument("--checkpoint", help="checkpoint directory to open (its folder's checkpoints are listed too)")
    args = parser.parse_args(argv)
    if problems := settings.problems():
        parser.exit(2, "".join(f"app.py: {problem}\n" for problem in problems))
    host = os.environ.get("GRADIO_SERVER_NAME") or args.host
    if args.port and not port_is_free(host, args.port):
        parser.exit(1, f"app.py: port {args.port} on {host} is taken (is the app already running?); "
                       f"choose another with --port\n")
    costly.use_threads(cpu.threads_to_use(settings.value("EXPLORER_THREADS"), since=OTHERS_BEFORE_IMPORTS))
    checkpoint = Path(args.checkpoint).resolve() if args.checkpoint else None
    services = Services.default(roots=[checkpoint.parent] if checkpoint else None)
    demo = build_app(services, checkpoint.name if checkpoint else None)
    if not gc.isenabled():  # started as a program: see the top
        gc.freeze()
        gc.enable()
    services.open_at_start(OpeningAtStart.sources_from_environment())
    services.costly.worker.start()  # it loads its modules while the server starts
    demo.launch(server_name=host, server_port=args.port, share=args.share, footer_links=["api", "settings"],
                **launch_options())


if __name__ == "__main__":
    main()
