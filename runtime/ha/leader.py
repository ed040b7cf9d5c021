"""Leader election and retrieval on ZooKeeper (Flink: DefaultLeaderElectionService with its
ZooKeeperLeaderElectionDriver, and ZooKeeperLeaderRetrievalDriver), as one small latch of our own.

Election: each contender (a JobManager process) creates an ephemeral sequential node under
`<cluster>/latch`; the one with the lowest sequence number leads. The others watch the node just
before theirs, so a lost leader wakes exactly one successor. The leader then publishes
LeaderInformation (its REST URL, the leader session id) in the ephemeral node `<cluster>/leader`,
which clients read (retrieval). An ephemeral node lives as long as its owner's ZooKeeper session:
a killed or paused leader is replaced once ZooKeeper expires that session.

Connection states (kazoo's, Curator's in Flink): SUSPENDED (connection lost, session maybe alive)
keeps leadership for at most the session timeout, after which the session is certainly gone on
the server side (another contender may lead by then), so leadership is revoked locally too; LOST
(the server expired the session) revokes at once. A contender rejoins the election with a new
session when the connection returns. Granting and revoking run on one thread of their own, in
order, never on kazoo's event thread.

`confirm_leadership` asks the server (one round trip) whether this contender's latch node is still
the lowest: the fence a leader passes before each commit, so a leader that was paused past its
session timeout learns it lost leadership before it writes anything.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from pydantic import BaseModel

from runtime.core.errors import MillraceError

log = logging.getLogger(__name__)

LATCH = "latch"
LEADER = "leader"
_PREFIX = "contender-"


class LeaderInformation(BaseModel):
    """What the leader publishes and clients read (Flink: LeaderInformation)."""

    session_id: str
    rest_url: str
    contender_id: str  # host:pid of the JobManager process


class LeaderContender(Protocol):
    """What an elected component offers the election service (Flink: LeaderContender)."""

    def grant_leadership(self, session_id: str) -> None: ...

    def revoke_leadership(self) -> None: ...


class ZooKeeperUnavailableError(MillraceError):
    """ZooKeeper could not be reached (at start: within the connection timeout)."""


def contender_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def connect(quorum: str, connection_timeout_ms: int, session_timeout_ms: int) -> Any:
    """A started kazoo client, or ZooKeeperUnavailableError naming the quorum."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.retry import KazooRetry

    client = KazooClient(
        hosts=quorum, timeout=session_timeout_ms / 1000.0,
        # keep reconnecting for ever: a leader that loses ZooKeeper waits for it (its session decides)
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=1.0),
        command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=0.5),
        logger=logging.getLogger("millrace.zookeeper"),
    )
    try:
        client.start(timeout=connection_timeout_ms / 1000.0)
    except KazooTimeoutError:
        client.stop()
        client.close()
        raise ZooKeeperUnavailableError(
            f"cannot reach ZooKeeper at {quorum} within {connection_timeout_ms / 1000:.0f}s "
            "(high-availability.zookeeper.quorum; start one with infra/zookeeper.sh start)"
        ) from None
    return client


def read_leader(client: Any, cluster_path: str) -> LeaderInformation | None:
    """The current leader's information, None while there is none (retrieval)."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get(f"{cluster_path}/{LEADER}")
    except NoNodeError:
        return None
    try:
        return LeaderInformation.model_validate_json(data)
    except ValueError:
        log.warning("the leader node %s/%s holds no leader information: %r", cluster_path, LEADER, data[:200])
        return None


def retrieve_leader(quorum: str, cluster_path: str, timeout_s: float = 15.0, connection_timeout_ms: int = 15_000) -> LeaderInformation:
    """One-shot retrieval for clients: the leader's information, waiting up to `timeout_s` for one
    to be elected (a failover in progress)."""
    client = connect(quorum, connection_timeout_ms, 10_000)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            info = read_leader(client, cluster_path)
            if info is not None:
                return info
            if time.monotonic() > deadline:
                raise ZooKeeperUnavailableError(f"no JobManager leads cluster {cluster_path} (ZooKeeper {quorum}) after {timeout_s:.0f}s")
            time.sleep(0.2)
    finally:
        client.stop()
        client.close()


class ZooKeeperLeaderElection:
    """One contender's part in the election of `<cluster_path>`."""

    def __init__(
        self, client: Any, cluster_path: str, session_timeout_ms: int, rest_url: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.cluster_path = cluster_path
        self.session_timeout_s = session_timeout_ms / 1000.0
        self.rest_url = rest_url
        self.clock = clock
        self.contender_id = contender_id()
        self._contender: LeaderContender | None = None
        self._node: str | None = None  # our latch node's full path
        self._session: str | None = None  # the leader session id while we lead
        self._published: str | None = None  # the session whose leader information is published (its jobs recovered)
        self._suspended_since: float | None = None
        self._events = ThreadPoolExecutor(max_workers=1, thread_name_prefix="leader-election")
        self._lock = threading.RLock()
        self._stopped = False
        self.connection_state = "CONNECTED"

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, contender: LeaderContender) -> None:
        self._contender = contender
        self.client.ensure_path(f"{self.cluster_path}/{LATCH}")
        self.client.add_listener(self._on_connection_state)
        self._submit(self._join)

    def stop(self) -> None:
        """Leave the election: leadership revoked, our nodes deleted (a standby takes over at once)."""
        with self._lock:
            self._stopped = True
        self._submit(self._leave)
        self._events.shutdown(wait=True)

    @property
    def is_leader(self) -> bool:
        return self._session is not None

    @property
    def leader_session_id(self) -> str | None:
        return self._session

    def confirm_leadership(self, session_id: str | None) -> bool:
        """Does this contender still lead under `session_id`? Asks the server (the commit fence)."""
        from kazoo.exceptions import KazooException

        with self._lock:
            if session_id is None or self._session != session_id or self._node is None:
                return False
            node = self._node
        # cut off from ZooKeeper (a server of the ensemble lost, a network blip): wait for the connection
        # within the session timeout, as the session itself does; a leader that gets it back in time still
        # leads (its session lives on), one that does not is revoked by then anyway
        deadline = self.clock() + self.session_timeout_s
        while not self.client.connected:
            if self.clock() > deadline or self._session != session_id:
                return False
            time.sleep(0.05)
        try:
            children = self.client.get_children(f"{self.cluster_path}/{LATCH}")
        except KazooException as e:  # not connected, session expired: not a leader we can vouch for
            log.warning("[leader election] cannot confirm leadership with ZooKeeper: %s", e)
            return False
        except Exception as e:  # noqa: BLE001 - kazoo raises its timeout errors outside KazooException
            log.warning("[leader election] cannot confirm leadership with ZooKeeper: %r", e)
            return False
        ours = [c for c in children if c.startswith(_PREFIX)]
        return bool(ours) and f"{self.cluster_path}/{LATCH}/{min(ours, key=_sequence)}" == node

    # --- the latch --------------------------------------------------------------------------------
    def _submit(self, fn: Callable[[], None]) -> None:
        try:
            self._events.submit(self._guarded, fn)
        except RuntimeError:  # stopped
            pass

    def _guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            log.exception("[leader election] %s failed", getattr(fn, "__name__", fn))

    def _join(self) -> None:
        with self._lock:
            if self._stopped:
                return
        if self._node is None or not self.client.exists(self._node):
            self._node = self.client.create(
                f"{self.cluster_path}/{LATCH}/{_PREFIX}", self.contender_id.encode(), ephemeral=True, sequence=True,
            )
            log.info("[leader election] %s joined the election of %s as %s", self.contender_id, self.cluster_path, self._node)
        self._check()

    def _check(self) -> None:
        """Lead if our node is the lowest; otherwise watch the one just before ours."""
        with self._lock:
            if self._stopped or self._node is None:
                return
        latch = f"{self.cluster_path}/{LATCH}"
        children = sorted((c for c in self.client.get_children(latch) if c.startswith(_PREFIX)), key=_sequence)
        name = self._node.rsplit("/", 1)[1]
        if name not in children:  # our session expired under us: rejoin
            self._node = None
            self._revoke("our election node is gone (session expired)")
            self._join()
            return
        index = children.index(name)
        if index == 0:
            if self._session is None:
                self._grant()
            return
        before = f"{latch}/{children[index - 1]}"
        if self.client.exists(before, watch=lambda _event: self._submit(self._check)) is None:
            self._check()  # it went between listing and watching

    def _grant(self) -> None:
        """Lead: the contender first recovers (its jobs run again), then the leader information is
        published, so a client that finds the new leader also finds its jobs (Flink confirms
        leadership after the Dispatcher's recovery the same way)."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        session = uuid.uuid4().hex
        with self._lock:
            self._session = session
        log.info("[leader election] %s leads %s (leader session %s)", self.contender_id, self.cluster_path, session)
        assert self._contender is not None
        self._contender.grant_leadership(session)
        if self._session != session:
            return
        info = LeaderInformation(session_id=session, rest_url=self.rest_url, contender_id=self.contender_id)
        path = f"{self.cluster_path}/{LEADER}"
        data = info.model_dump_json().encode()
        try:
            self.client.create(path, data, ephemeral=True)
        except NodeExistsError:
            # the previous leader's node, its session not yet expired in this server's view (it
            # stepped down without deleting it), or ours from before: the latch is the truth
            try:
                self.client.delete(path)
            except NoNodeError:
                pass
            self.client.create(path, data, ephemeral=True)
        self._published = session

    def _revoke(self, why: str) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is None:
            return
        log.warning("[leader election] %s lost the leadership of %s: %s", self.contender_id, self.cluster_path, why)
        assert self._contender is not None
        self._contender.revoke_leadership()
        if self.client.connected:
            self._delete_leader_node(session)

    def _leave(self) -> None:
        from kazoo.exceptions import KazooException

        leading = self._session
        self._revoke("this JobManager stops")
        try:
            if leading is not None:
                self._delete_leader_node(leading)
            if self._node is not None:
                self.client.delete(self._node)
        except KazooException:
            pass
        self._node = None

    def _delete_leader_node(self, session: str) -> None:
        """Our leader information goes with our leadership (clients stop being sent here)."""
        from kazoo.exceptions import KazooException

        try:
            info = read_leader(self.client, self.cluster_path)
            if info is not None and info.session_id == session:
                self.client.delete(f"{self.cluster_path}/{LEADER}")
        except KazooException:
            pass

    # --- connection states ------------------------------------------------------------------------
    def _on_connection_state(self, state: Any) -> None:
        """kazoo's event thread: note the state, act on our own thread."""
        self.connection_state = str(state)
        if state == "LOST":
            self._submit(lambda: self._on_lost())
        elif state == "SUSPENDED":
            self._suspended_since = self.clock()
            since = self._suspended_since
            timer = threading.Timer(self.session_timeout_s, lambda: self._submit(lambda: self._suspension_expired(since)))
            timer.daemon = True
            timer.start()
        elif state == "CONNECTED":
            self._suspended_since = None
            self._submit(self._on_reconnected)

    def _on_lost(self) -> None:
        self._node = None
        self._revoke("the ZooKeeper session expired")

    def _suspension_expired(self, since: float) -> None:
        if self._suspended_since == since:
            self._revoke(f"ZooKeeper unreachable for the session timeout ({self.session_timeout_s:.0f}s)")

    def _on_reconnected(self) -> None:
        with self._lock:
            if self._stopped:
                return
        self._join()  # same session: our node is still there and _check confirms; a new one: rejoin

    def describe(self) -> dict[str, Any]:
        leader = None
        try:
            if self.client.connected:  # never wait for ZooKeeper in a status view
                leader = read_leader(self.client, self.cluster_path)
        except Exception:  # noqa: BLE001 - a status view, shown as unknown
            pass
        return {
            # elected but not yet published: recovering its jobs (clients are not sent here yet)
            "role": ("leader" if self._published == self._session else "recovering") if self.is_leader else "standby",
            "leader_session_id": self._session,
            "leader": None if leader is None else leader.model_dump(), "zookeeper_connection": self.connection_state,
            "contender_id": self.contender_id,
        }


def _sequence(name: str) -> int:
    return int(name.rsplit("-", 1)[1])
