"""How one broker is put together, stage by stage (app.py runs the stages in order).

Each builder takes what the stages before it made and returns its own parts as a frozen record:
storage (logs, topics, replicas, metrics) -> security (authorizer, users, each listener's login) ->
control (local files, or the controller's session: access admin, producer-id blocks, replica fetchers)
-> coordination (groups, transactions) -> the handlers' context, built once and frozen -> network
(one Kafka server per listener, the admin HTTP). Local and controller mode choose a control builder
(control.py); nothing downstream checks which mode it is in.
"""
