"""Emulated training operators: Kubeflow Training Operator v1 (PyTorchJob, TFJob, XGBoostJob),
the MPI Operator v2beta1 (MPIJob), the batch/v1 Job controller they rely on, and the apps/v1
Deployment and ReplicaSet controllers (for kubectl's typed commands).

`install(sim)` is the `operators` component of `SimCluster(components=(...))`. Each controller
turns job objects into the services, pods, ConfigMaps, Secrets and Jobs the real operator makes,
with the same names, labels, env and status conditions (see the module docstrings and
/work/shared/docs/conventions.md §1, §2, §6.6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .batchjob import BatchJobController
from .deployment import DeploymentController, ReplicaSetController, install_scale
from .kubeflow import Framework, KubeflowJobController
from .mpi import MPIJobController
from .pytorch import PyTorch
from .tensorflow import TensorFlow
from .xgboost import XGBoost

if TYPE_CHECKING:
    from ..cluster import SimCluster

FRAMEWORKS: tuple[type[Framework], ...] = (PyTorch, TensorFlow, XGBoost)

__all__ = [
    "FRAMEWORKS",
    "BatchJobController",
    "KubeflowJobController",
    "MPIJobController",
    "install",
]


def install(sim: SimCluster) -> None:
    sim.add_controller(BatchJobController(sim))
    sim.add_controller(DeploymentController(sim))
    sim.add_controller(ReplicaSetController(sim))
    install_scale(sim)
    for fw in FRAMEWORKS:
        sim.add_controller(KubeflowJobController(sim, fw()))
    sim.add_controller(MPIJobController(sim))
