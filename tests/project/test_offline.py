"""The default path never touches the network.

With the Hugging Face offline switches set and every Python-level way out of the machine guarded (``connect``,
``connect_ex``, ``sendto``, ``create_connection``, name resolution), we load the default model, on first use
(GGUF conversion into an empty cache) and from the converted copy, and run a small workload; the guard records
any attempt to reach something that is not loopback and refuses it. Connections made from native code that
bypass Python's ``socket`` module are outside what an in-process guard can see.
"""

from __future__ import annotations

import ipaddress
import socket

import pytest

from batchscope.engine.config import EngineConfig
from batchscope.steplog import trace

# Greedy outputs of SmolLM2-135M-Instruct (float32, CPU) for two prompts of the seed-abcd scenario, as recorded
# in batchscope/assets/traces/seed-abcd-continuous.jsonl: " Paris.\n\n" and " 10" (first three tokens of " 100").
PARIS = [7042, 30, 198, 198]
WATER = [216, 33, 32]
SPECS = [
    {"request_id": "B", "prompt": "The capital of France is", "max_tokens": 4, "ignore_eos": True},
    {"request_id": "C", "prompt": "Water boils at", "max_tokens": 3, "ignore_eos": True},
]


def _is_loopback(address) -> bool:
    """True for a Unix socket path or a loopback host (127.0.0.0/8, ::1, localhost)."""
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode()
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:  # a name other than localhost
        return False


class NetworkGuard:
    """Records and refuses every non-loopback connection or name lookup made through ``socket``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.attempts: list[str] = []
        real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
        real_sendto, real_create, real_getaddrinfo = socket.socket.sendto, socket.create_connection, socket.getaddrinfo

        def refuse(what: str, address):
            self.attempts.append(f"{what} {address!r}")
            raise OSError(f"network access blocked by test_offline: {what} {address!r}")

        def connect(sock, address):
            if not _is_loopback(address):
                refuse("connect", address)
            return real_connect(sock, address)

        def connect_ex(sock, address):
            if not _is_loopback(address):
                refuse("connect_ex", address)
            return real_connect_ex(sock, address)

        def sendto(sock, data, *args):
            address = args[-1]
            if not _is_loopback(address):
                refuse("sendto", address)
            return real_sendto(sock, data, *args)

        def create_connection(address, *args, **kwargs):
            if not _is_loopback(address):
                refuse("create_connection", address)
            return real_create(address, *args, **kwargs)

        def getaddrinfo(host, *args, **kwargs):
            if not _is_loopback((host,)):
                refuse("getaddrinfo", host)
            return real_getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        monkeypatch.setattr(socket.socket, "sendto", sendto)
        monkeypatch.setattr(socket, "create_connection", create_connection)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def guard(monkeypatch):
    """Offline switches on, network guarded for the test's duration."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    return NetworkGuard(monkeypatch)


def test_guard_refuses_and_records_the_outside_but_lets_loopback_through(guard):
    """The guard is not vacuous: reaching out (by address or by name) is refused and recorded; loopback works."""
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("203.0.113.7", 443), timeout=1)  # TEST-NET-3: never routed
    with pytest.raises(OSError, match="blocked"):
        socket.getaddrinfo("huggingface.co", 443)
    with socket.socket() as raw, pytest.raises(OSError, match="blocked"):
        raw.connect(("198.51.100.1", 80))
    assert len(guard.attempts) == 3
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
    assert len(guard.attempts) == 3


@pytest.mark.real_model
@pytest.mark.parametrize("cache", ["first-use", "converted-copy"])
def test_default_model_loads_and_runs_without_network(guard, cache, tmp_path, monkeypatch):
    """Loading SmolLM2 (converting the GGUF into an empty cache, or from the converted copy) and running two
    requests makes no network call, and the run is real: greedy outputs equal the recorded ones."""
    from batchscope.engine.llm import generate_trace
    from batchscope.model.models import DEFAULT_MODEL, load_model

    if cache == "first-use":
        monkeypatch.setenv("BATCHSCOPE_CACHE", str(tmp_path / "cache"))
    loaded = load_model(DEFAULT_MODEL, device="cpu")
    if cache == "first-use":
        assert (tmp_path / "cache" / "models" / DEFAULT_MODEL / "config.json").is_file()
    records = generate_trace(
        loaded, SPECS, EngineConfig(max_num_seqs=2, max_num_batched_tokens=16, block_size=4, num_kv_blocks=16)
    )
    trace.validate_records(records)
    outputs = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    assert outputs == {"B": PARIS, "C": WATER}
    assert guard.attempts == []


@pytest.mark.parametrize("name", ["no-such-org/no-such-model-4f2a", "./no/such/model/folder"])
def test_unknown_model_fails_fast_offline_naming_it(guard, name):
    """An id that is not in the local cache (or a missing folder) raises ModelLoadError naming it, without trying
    the network."""
    from batchscope.model.models import ModelLoadError, load_model

    expected = "does not exist" if name.startswith(".") else "cannot be loaded offline"  # a path, or an id
    with pytest.raises(ModelLoadError, match=f"model (folder )?'{name}'.* {expected}"):
        load_model(name, device="cpu")
    assert guard.attempts == []
