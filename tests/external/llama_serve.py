"""llama.cpp's server (``llama-cpp-python[server]``) on a socket this process binds itself: 127.0.0.1, port 0.

``python -m tests.external.llama_serve MODEL PORT_FILE`` binds the socket, writes the port it got to
``PORT_FILE`` (a temporary file renamed into place, so a reader never sees half of it) and serves the model on
that socket the way ``python -m llama_cpp.server --model MODEL`` does (its ``create_app`` and ``uvicorn``). The
test reads the port back: no port is picked free, released and bound again by another process (a race).
"""
from __future__ import annotations

import os
import socket
import sys


def main(model: str, port_file: str) -> None:
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(server_settings=ServerSettings(host="127.0.0.1", port=port),
                     model_settings=[ModelSettings(model=model)])
    tmp = f"{port_file}.tmp"
    with open(tmp, "w") as fh:
        fh.write(str(port))
    os.replace(tmp, port_file)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main(*sys.argv[1:3])
