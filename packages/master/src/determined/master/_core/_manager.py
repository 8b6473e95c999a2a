"""The composition root of the master's core: builds the services and wires them together.

    Transactions        the lifecycle lock, write sessions and after-commit effects
    Allocations         live allocations, preemption signals, kills, exits
    SearcherStates      the searcher of each running experiment, persisted in snapshots
    Lifecycle           the experiment/trial state machine and the searcher's actions
    TrialExits          what comes after an allocation ended (restart, pause, terminal state)
    WorkDirs            allocations' work directories, removed once the allocations end
    AllocationEvents    the resource manager's events, handled on one dispatcher thread
    Experiments         experiment and trial operations of the REST API
    SearcherOperations  the searcher-operations protocol of running trials
    TrialRecords        status, metadata, logs and alerts running trials record
    Accounts            users, passwords and login sessions
    AccessTokens        users' long-lived access tokens (create, list, revoke)
    Checkpoints         checkpoint reports and the files left of them after deletes
    ModelRegistry       models and their versions
    UnmanagedRuns       experiments and trials core_v2 runs outside the master (never scheduled)
    MetricsWriter       group commit of metric reports (validations go to ``Experiments``)
    TrialSources        trials that used a checkpoint or model version, and their metrics
    ClusterMessages     the cluster-wide message of the admins
    ClusterView         the job queue and the slots (the RM's queue joined with job owners)
    ResourceUsage       historical slot use of allocations (``det resources``)
    LogSettings         the master's log level and colour, changed at run time
    Tasks               commands, TensorBoards, notebooks and shells (placed by the RM like trials)
    CheckpointGC        checkpoint garbage collection, each run a ``CHECKPOINT_GC`` task
    Tensorboards        TensorBoard tasks over trials' event files; experiments' TensorBoard files
    Notebooks           JupyterLab tasks behind the proxy; Jupyter's activity for their idle timeout
    Templates           config templates, merged under an experiment's config on create
    ConfigPolicies      admins' invariant configs and constraints of experiments and tasks
    ExperimentLabels    experiments' labels one at a time, and every label in use
    Projects            projects of workspaces, their notes, and moving experiments between them
    Workspaces          workspaces: projects' containers, their pins and defaults (checkpoint storage)
    Authz               built-in roles and the one authorization check every route makes
    Groups              user groups and their members
    Roles               role assignments to users and groups, and what a user holds
    Webhooks            webhooks, their triggers, and delivery of the events they send
    AgentStates         admins' enable/disable/drain of agents and slots, kept across restarts

Each service gets only the services it uses; the REST routes use ``experiments``,
``searcher_operations``, ``trial_records``, ``accounts``, ``allocations`` and ``metrics_writer``.
"""

from __future__ import annotations

import pathlib
import threading
from typing import Any

from determined.master._core._accounts import Accounts
from determined.master._core._agent_states import AgentStates
from determined.master._core._allocations import Allocations
from determined.master._core._authz import Authz
from determined.master._core._checkpoints import Checkpoints
from determined.master._core._cluster_messages import ClusterMessages
from determined.master._core._cluster_view import ClusterView
from determined.master._core._config_policies import ConfigPolicies
from determined.master._core._events import AllocationEvents
from determined.master._core._experiments import Experiments
from determined.master._core._gc_tasks import CheckpointGC
from determined.master._core._groups import Groups
from determined.master._core._labels import ExperimentLabels
from determined.master._core._lifecycle import Lifecycle
from determined.master._core._log_settings import LogSettings
from determined.master._core._metrics_writer import POSTGRES_WRITER_LANES, MetricsWriter
from determined.master._core._model_registry import ModelRegistry
from determined.master._core._notebooks import Notebooks
from determined.master._core._projects import Projects
from determined.master._core._recovery import recover
from determined.master._core._roles import Roles
from determined.master._core._searcher_ops import SearcherOperations
from determined.master._core._searcher_state import SearcherStates
from determined.master._core._tasks import Tasks
from determined.master._core._templates import Templates
from determined.master._core._tensorboards import Tensorboards
from determined.master._core._tokens import AccessTokens
from determined.master._core._transactions import Transactions
from determined.master._core._trial_exits import TrialExits
from determined.master._core._trial_records import TrialRecords
from determined.master._core._trial_sources import TrialSources
from determined.master._core._unmanaged import UnmanagedRuns
from determined.master._core._usage import ResourceUsage
from determined.master._core._webhooks import Webhooks
from determined.master._core._work_dirs import WorkDirs
from determined.master._core._workspaces import Workspaces
from determined.master.db import Database, utcnow
from determined.master.db._metric_inserts import prepared_form


class Manager:
    """The core services of one master, built and wired together."""

    def __init__(
        self,
        db: Database,
        rm: Any,
        data_dir: pathlib.Path,
        cluster_id: str,
    ) -> None:
        self._db = db
        self._rm = rm
        self.transactions = Transactions(db)
        self.allocations = Allocations(self.transactions, rm)
        self.searcher_states = SearcherStates(db)
        self.lifecycle = Lifecycle(
            self.transactions, self.allocations, self.searcher_states, rm, self._start_gc
        )
        self.trial_exits = TrialExits(self.lifecycle, self.searcher_states)
        self.work_dirs = WorkDirs(data_dir)
        self.events = AllocationEvents(
            self.transactions, self.allocations, self.trial_exits, rm, self.work_dirs, cluster_id
        )
        """What the resource manager is started with (its ``ResourceManagerEvents``)."""
        self.experiments = Experiments(
            self.transactions, self.lifecycle, self.searcher_states, rm, self._start_gc
        )
        self.searcher_operations = SearcherOperations(
            self.transactions, self.lifecycle, self.searcher_states, self.allocations
        )
        self.trial_records = TrialRecords(db)
        self.accounts = Accounts(db)
        self.tokens = AccessTokens(db)
        self.authz = Authz(db)
        self.tokens.authz = self.authz
        self.groups = Groups(db, self.authz)
        self.roles = Roles(db, self.authz)
        self.projects = Projects(db, self.experiments.delete)
        self.workspaces = Workspaces(db, self.projects.delete, self.authz.assign_creator)
        self.checkpoints = Checkpoints(db)
        self.model_registry = ModelRegistry(db)
        self.unmanaged = UnmanagedRuns(self.transactions, self.lifecycle)
        self.trial_sources = TrialSources(db)
        self.cluster_messages = ClusterMessages(db)
        self.cluster_view = ClusterView(db, rm, utcnow())
        self.resource_usage = ResourceUsage(db)
        self.log_settings = LogSettings()
        self.tasks = Tasks(db, rm, self.work_dirs, cluster_id, lambda: self.events.master_url)
        self.events.tasks = self.tasks
        self.checkpoint_gc = CheckpointGC(db, self.tasks)
        self.agent_states = AgentStates(
            db, rm, self.cluster_view, self.transactions, self.allocations, self.tasks
        )
        local = type(rm).__name__ == "LocalResourceManager"  # else the proxy reaches another host
        self.tensorboards = Tensorboards(db, self.tasks, rm, "127.0.0.1" if local else "0.0.0.0")
        self.notebooks = Notebooks(self.tasks, "127.0.0.1" if local else "0.0.0.0")
        self.templates = Templates(db)
        self.config_policies = ConfigPolicies(db)
        self.tasks.config_policies = self.config_policies
        self.experiment_labels = ExperimentLabels(self.transactions, db)
        self.webhooks = Webhooks(db, self.authz)
        self._metrics_writer: MetricsWriter | None = None
        self._metrics_writer_lock = threading.Lock()

    @property
    def metrics_writer(self) -> MetricsWriter:
        """The group-commit writer of metric reports (started on first use)."""
        if self._metrics_writer is None:
            with self._metrics_writer_lock:
                if self._metrics_writer is None:
                    db = self.transactions.db
                    self._metrics_writer = MetricsWriter(
                        self.transactions.txn,
                        self.experiments.validations_stored,
                        concurrent=db.concurrent_write,
                        lanes=1 if db.is_sqlite else POSTGRES_WRITER_LANES,
                        form=prepared_form(db.engine.dialect),
                    )
        return self._metrics_writer

    @property
    def searchers(self) -> dict[int, Any]:
        """The live searcher of each running experiment, by experiment id."""
        return self.searcher_states.searchers

    @property
    def master_url(self) -> str:
        """The URL trials reach the master on."""
        return self.events.master_url

    @master_url.setter
    def master_url(self, url: str) -> None:
        self.events.master_url = url

    def start_dispatcher(self) -> None:
        """Start handling resource-manager events (and watching for lost unmanaged trials)."""
        self.events.start()
        self.unmanaged.start_watchdog()
        self.tasks.start_watchdog()
        self.webhooks.start()

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until queued resource-manager events are handled (tests and shutdown)."""
        self.events.wait_idle(timeout)

    def recover(self) -> None:
        """Resume every non-terminal experiment after a (re)start of the master."""
        self.agent_states.restore()  # before anything is scheduled
        self.work_dirs.discard_all()  # every allocation of an earlier master has ended
        recover(self.transactions, self._rm, self.searcher_states, self.lifecycle, self.trial_exits)
        self.tasks.recover()

    def begin_shutdown(self) -> None:
        """The master is about to stop (SIGTERM, ``det-master down``): from now on a trial that
        fails is not marked failed; start-up recovery resumes it, as after a crash."""
        self.events.shutting_down = True
        # Answer the trials' preemption long-polls now (not preempted: they carry on and poll the
        # next master), or the HTTP server's graceful stop waits on them, then cancels each with
        # a traceback in the log.
        self.allocations.end_long_polls()

    def stop(self) -> None:
        """Drain the metrics writer and the event queue; cancel preemption timers."""
        if self._metrics_writer is not None:
            self._metrics_writer.close()
        self.events.stop()
        self.allocations.close()
        self.unmanaged.stop_watchdog()
        self.webhooks.stop()
        self.notebooks.close()
        self.tasks.close()
        self.work_dirs.close()

    def _start_gc(self, exp_id: int) -> None:
        threading.Thread(
            target=self.checkpoint_gc.collect_experiment,
            args=(exp_id,),
            name=f"det-gc-{exp_id}",
            daemon=True,
        ).start()
