"""The child-job protocol: a web half (``grpo_core/<subject>/job.py``) asks, a child (``python -m
grpo_core.<subject>.worker``) answers. request.py is the web side of the round trip, answer_file.py the child's."""
