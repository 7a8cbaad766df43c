"""THE child-job protocol, one for every child job: a web half (``grpo_core/<subject>/job.py``) asks, a child
(``python -m grpo_core.<subject>.worker``) answers. request.py is the web side (start, watch, cancel, timeout, the
answer or the job's error), answer_file.py the child's (the request in, the answer or the error shape out),
progress.py the one progress file both read or write; slots.py shares the job pools fairly between logins."""
