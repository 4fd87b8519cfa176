"""The node side: the kubelet (pods as local processes, their status, logs, environment and
volumes), the reaper, /proc, exec and the pod/service/node proxies."""
