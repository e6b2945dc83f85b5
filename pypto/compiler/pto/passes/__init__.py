"""Passes over the PTO program, in pipeline order: ``split`` (cube/vector parts),
``double_buffer`` (ping-pong loads), ``acc_init`` (accumulators started by the cube),
``fillpad`` (a load's padding filled just before its first use),
``sync`` (flags between pipes); ``hazards`` checks the result, whoever placed the flags."""
