"""Who may use a served dashboard and what a login may make it run or read: logins, run ownership, the boundary."""
