"""GPUs: the DCGM exporters, the GPU profile annotations, and Prometheus for the demo and tests."""
