# Sourced by the install scripts (not run): `make_venv DIR` creates a
# Python virtual environment at DIR, installing Debian's python3-venv
# first when python3 lacks the venv module (Debian splits it out).
make_venv() {
    python3 -m venv "$1" 2>/dev/null && return
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq python3-venv
    python3 -m venv "$1"
}
