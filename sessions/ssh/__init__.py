"""The SSH front door (`ranks serve --ssh`, issue #14): a headless asyncssh server that gives each
SSH user the dashboard, or one read-only command, as their own Kubernetes identity.

- `keys`: authorized keys (a file, or a directory of one file per user) and the `--users` map ->
  the identity each key acts as (never the login name the client claims);
- `audit`: one line per login, logout and refused action;
- `user_files`: each user's own files on the server (`--user-files`): saves, `ssh host files`;
- `config`: what the server is started with (`ServeConfig`), the cluster it pins;
- `server`: the asyncssh server, its sessions (each one a child `ranks` process, on a pty for the
  dashboard) and `serve`, which runs it until SIGINT/SIGTERM.
"""

SSH_SESSION_ENV = "RANKS_SSH_SESSION"  # set in the door's children: the user's machine is another one
# the server's settings for a session's `ranks` process (JSON: context, identity, limits...), given
# out of band so that nothing the user types can bend them (`tui.cli.door` reads them)
SERVER_SETTINGS_ENV = "RANKS_SERVER_SETTINGS"
# a door's dashboard: the directory of the user's own files (`--user-files`, `user_files`), where
# its saves go (else they are refused), and the port `ssh HOST files NAME` fetches them through
USER_FILES_ENV = "RANKS_USER_FILES"
SSH_PORT_ENV = "RANKS_SSH_PORT"
# a door's session: `user@address` as the client reached the server, which the lines to paste on
# the user's own machine name (`ssh -N -L ...`, `ssh ... files NAME`); unset: "<this server>"
SSH_HOST_ENV = "RANKS_SSH_HOST"


def door_host() -> str:
    """Where the user's machine reaches this door (`SSH_HOST_ENV`), for a line to paste there."""
    import os

    return os.environ.get(SSH_HOST_ENV) or "<this server>"
