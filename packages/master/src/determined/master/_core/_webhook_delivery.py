"""Delivery of webhook events: queued rows posted by a small pool of threads, with retries.

Events are rows of ``webhook_events_queue`` written in the transaction that decided to send them,
so an event survives a master restart until it is delivered (or given up on). Posting happens on
the pool's threads only: a request or a trial's report never waits for a receiver. A receiver that
answers 5xx or cannot be reached is tried again after 1 s and 2 s (upstream's schedule); a 4xx
answer is final. Every post carries upstream's signature headers.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy import delete, select

from determined.master._core._webhook_payloads import signed_headers
from determined.master.db import Database
from determined.master.db._webhook_models import WebhookEvent

logger = logging.getLogger("determined.master")


class DeliveryError(Exception):
    """A post that failed: the receiver's status or the connection error, in words.

    ``permanent``: the receiver refused it (4xx); trying again would not help."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class WebhookShipper:
    """Posts queued events off the caller's thread and deletes each row once it is done."""

    def __init__(
        self,
        db: Database,
        signing_key: bytes,
        workers: int = 4,
        attempts: int = 3,
        backoff_s: float = 1.0,
        timeout_s: float = 10.0,
    ) -> None:
        self._db = db
        self.signing_key = signing_key
        """The HMAC-SHA256 key of the signature header."""
        self._attempts = max(1, attempts)
        self._backoff_s = backoff_s
        self._client = httpx.Client(timeout=timeout_s, follow_redirects=False)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="det-webhook")
        self._inflight: set[int] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def submit(self, rows: list[WebhookEvent]) -> None:
        """Start delivering committed event rows (rows already in flight are skipped)."""
        for row in rows:
            with self._lock:
                if self._closed.is_set() or row.id in self._inflight:
                    continue
                self._inflight.add(row.id)
            try:
                self._pool.submit(self._deliver, row.id, row.url, row.payload)
            except RuntimeError:  # the pool shut down meanwhile: the row waits for the next start
                with self._lock:
                    self._inflight.discard(row.id)

    def resend_pending(self) -> None:
        """Deliver the events a previous run of the master left in the queue."""
        with self._db.read() as session:
            rows = list(session.scalars(select(WebhookEvent).order_by(WebhookEvent.id)))
        if rows:
            logger.info("webhooks: delivering %d events queued before the restart", len(rows))
        self.submit(rows)

    def post(self, url: str, payload: str) -> None:
        """Post one body now, once (the test route); raises :class:`DeliveryError`."""
        body = payload.encode()
        try:
            resp = self._client.post(
                url, content=body, headers=signed_headers(body, self.signing_key)
            )
        except httpx.HTTPError as e:
            raise DeliveryError(f"could not reach {url}: {e}") from None
        if resp.status_code >= 400:
            permanent = resp.status_code < 500
            raise DeliveryError(f"{url} answered {resp.status_code}", permanent)

    def _deliver(self, row_id: int, url: str, payload: str) -> None:
        try:
            for attempt in range(self._attempts):
                if self._closed.is_set():
                    return  # the row stays queued for the next start
                try:
                    self.post(url, payload)
                    break
                except DeliveryError as e:
                    if e.permanent or attempt + 1 == self._attempts:
                        logger.warning("webhooks: giving up on event %d: %s", row_id, e)
                        break
                    if self._closed.wait(self._backoff_s * (2**attempt)):
                        return
            with self._db.write() as session:
                session.execute(delete(WebhookEvent).where(WebhookEvent.id == row_id))
        except Exception:
            logger.exception("webhooks: delivering event %d failed", row_id)
        finally:
            with self._lock:
                self._inflight.discard(row_id)

    def close(self) -> None:
        """Stop: posts under way finish, queued rows wait for the next start."""
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
