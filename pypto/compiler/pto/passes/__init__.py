"""Passes over the PTO program, in pipeline order: ``split`` (cube/vector parts),
``double_buffer`` (ping-pong loads), ``acc_init`` (accumulators started by the cube),
``sync`` (flags between pipes); ``hazards`` checks the result, whoever placed the flags."""
