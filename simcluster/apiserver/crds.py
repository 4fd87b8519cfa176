"""CustomResourceDefinitions simcluster installs: the Kubeflow, Trainer, JobSet and Run:ai kinds.

To serve another kind, add a `CrdSpec` to `DEFAULT_CRDS` (or pass one to `SimCluster(crds=...)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATE_COLUMNS: tuple[dict[str, Any], ...] = (
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
)


@dataclass(frozen=True)
class CrdSpec:
    group: str
    version: str
    kind: str
    plural: str
    short_names: tuple[str, ...] = ()
    namespaced: bool = True
    printer_columns: tuple[dict[str, Any], ...] = STATE_COLUMNS
    categories: tuple[str, ...] = ("kubeflow", "all")

    def manifest(self) -> dict[str, Any]:
        version: dict[str, Any] = {
            "name": self.version,
            "served": True,
            "storage": True,
            "schema": {
                "openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                }
            },
            "subresources": {"status": {}},
        }
        if self.printer_columns:
            version["additionalPrinterColumns"] = list(self.printer_columns)
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{self.plural}.{self.group}"},
            "spec": {
                "group": self.group,
                "names": {
                    "kind": self.kind,
                    "listKind": f"{self.kind}List",
                    "plural": self.plural,
                    "singular": self.kind.lower(),
                    "shortNames": list(self.short_names),
                    "categories": list(self.categories),
                },
                "scope": "Namespaced" if self.namespaced else "Cluster",
                "versions": [version],
            },
        }


DEFAULT_CRDS: tuple[CrdSpec, ...] = (
    CrdSpec("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
    CrdSpec("kubeflow.org", "v1", "TFJob", "tfjobs"),
    CrdSpec("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs"),
    CrdSpec("kubeflow.org", "v1", "JAXJob", "jaxjobs"),
    CrdSpec("kubeflow.org", "v1", "PaddleJob", "paddlejobs"),
    CrdSpec("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
    CrdSpec("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", categories=("all",)),
    CrdSpec("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", categories=("all",)),
    CrdSpec("run.ai", "v2alpha1", "DistributedWorkload", "distributedworkloads", ("dw",),
            categories=("runai",)),
)
