"""How a controller pass writes what it saw: the engine's fenced compare-and-set per job, in one
transaction per batch of observations (a pass's polled jobs, its launches) instead of one each.

A sim job in Kueue's baseline made four commits (bench/README.md), each a round trip and a WAL
flush; the pass waited for them one job at a time. Written together, nothing is lost: each job's
write still checks the state it read and the controller's epoch, a crash before the commit loses
the batch's writes as it would have lost the last job's, and what they recorded is observed again
from the backend on the next pass. A batch that fails as a whole (one job's report cannot be
stored, a lock on SQLite) is written again one job at a time, as before."""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from service.lifecycle import bulk
from service.lifecycle.engine import Deposed, Engine
from service.lifecycle.protocol import Observation

log = logging.getLogger("trainjobs.lifecycle.loop")
APPLY_ATTEMPTS = 3


@dataclasses.dataclass
class Applied:
    changed: int = 0
    errors: int = 0


def apply_all(engine: Engine, session: Session, observations: Sequence[Observation], *, fence: int | None,
              actor: str) -> Applied:
    """Every observation in one transaction, committed; one at a time if that fails."""
    if len(observations) <= 1:
        out = Applied()
        for obs in observations:
            _add(out, apply_one(engine, session, obs, fence=fence, actor=actor))
        return out
    try:
        with engine.batch(session):
            changed = bulk.apply_many(engine, session, observations, fence=fence, actor=actor)
            session.commit()
    except Deposed:
        session.rollback()
        raise
    except Exception as e:
        session.rollback()
        log.warning("%d observations could not be written together (%s); writing them one at a time",
                    len(observations), type(e).__name__)
        out = Applied()
        for obs in observations:
            _add(out, apply_one(engine, session, obs, fence=fence, actor=actor))
        return out
    return Applied(changed=changed)


def _add(total: Applied, one: Applied) -> None:
    total.changed += one.changed
    total.errors += one.errors


def apply_one(engine: Engine, session: Session, obs: Observation, *, fence: int | None, actor: str) -> Applied:
    """One short transaction for one observation. On SQLite a write that races another
    connection's commit fails at once ("database is locked": the busy timeout does not apply to
    a stale read snapshot): read again and retry."""
    for attempt in range(APPLY_ATTEMPTS):
        try:
            changed = engine.apply(session, obs, fence=fence, actor=actor)
            session.commit()
        except Deposed:
            session.rollback()
            raise
        except OperationalError:
            session.rollback()
            if attempt + 1 < APPLY_ATTEMPTS:
                time.sleep(0.01 * (attempt + 1))
                continue
            log.exception("job %s: could not apply %s", obs.job_id, obs)
            return Applied(errors=1)
        except Exception:
            session.rollback()
            log.exception("job %s: could not apply %s", obs.job_id, obs)
            if obs.progress is not None or obs.error is not None:
                # Whatever in the backend's report could not be stored, the job must still
                # move on: apply the state alone.
                bare = dataclasses.replace(obs, progress=None, error=None if obs.error is None else {
                    "message": "the backend's error report could not be stored; see the service log"})
                return Applied(changed=apply_one(engine, session, bare, fence=fence, actor=actor).changed,
                               errors=1)
            return Applied(errors=1)
        return Applied(changed=int(changed))
    return Applied()
