"""simcluster: a local cluster that speaks the Kubernetes REST API.

For trying `ranks` and for tests; real use is against a real cluster's kubeconfig.
"""

from .cluster import SimCluster, ThreadedSimCluster, sim_in_thread

__all__ = ["SimCluster", "ThreadedSimCluster", "sim_in_thread"]
