# shellcheck shell=bash
# bash completion for looptrace(1). Installed as
# share/bash-completion/completions/looptrace (cmake/Install.cmake).
#
# The subcommands, their options and the built-in profiles are read from the
# looptrace being completed (`--help`, `looptrace profiles`, a few ms each),
# so that the completion cannot drift from the program.

# The options (-x and --xxx) `looptrace [SUB] --help` lists, one per line.
_looptrace_options() {
  "$1" ${2:+"$2"} --help 2>/dev/null |
    sed -n 's/^ \{1,4\}\(-[-A-Za-z0-9,]*\).*/\1/p' | tr ',' '\n' | grep -- '^-'
}

# The subcommands `looptrace --help` lists.
_looptrace_subcommands() {
  "$1" --help 2>/dev/null |
    sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p'
}

# The built-in profiles' names and the files starting with $2.
_looptrace_profiles() {
  mapfile -t COMPREPLY < <(compgen -W "$("$1" profiles 2>/dev/null |
    sed -n 's/^\([a-z][a-z0-9_-]*\) .*/\1/p')" -- "$2")
  mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -f -- "$2")
}

# Pids of programs starting with $1; with more than one, each shown with its comm
# ("1234 (gnome-shell)"): the common prefix bash inserts is still a pid.
_looptrace_pids() {
  local cur=$1 d pid comm
  local -a pids=()
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    # Kernel threads have no executable and nothing to trace.
    [[ $pid == "$cur"* && -e $d/exe ]] && pids+=("$pid")
  done
  if ((${#pids[@]} == 1)); then
    COMPREPLY=("${pids[0]}")
    return
  fi
  COMPREPLY=()
  for pid in "${pids[@]}"; do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    COMPREPLY+=("$pid ($comm)")
  done
}

_looptrace() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD - 1]}
  local prog=${COMP_WORDS[0]} sub="" i
  COMPREPLY=()

  # The subcommand, and a `--` after which a command line follows.
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --)
        if ((i == COMP_CWORD - 1)); then
          mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        else
          mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
        return
        ;;
      -*) ;;
      *) [[ -z $sub ]] && sub=${COMP_WORDS[i]} ;;
    esac
  done

  case $prev in
    -p | --pid)
      _looptrace_pids "$cur"
      return
      ;;
    --profile)
      _looptrace_profiles "$prog" "$cur"
      return
      ;;
    --input-mode)
      mapfile -t COMPREPLY < <(compgen -W "syscall uprobe" -- "$cur")
      return
      ;;
    --call-graph)
      mapfile -t COMPREPLY < <(compgen -W "auto fp dwarf" -- "$cur")
      return
      ;;
    --debug)
      mapfile -t COMPREPLY < <(compgen -W \
        "all elf resolve loader libbpf symbolize unwind" -- "$cur")
      return
      ;;
    --json | --perfetto | --folded | --folded-blocked | --html | --pprof | \
      --events | -o | --output | --input-binary)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return
      ;;
  esac

  if [[ -z $sub ]]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$(_looptrace_options "$prog")" \
        -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$(_looptrace_subcommands "$prog")" \
        -- "$cur")
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W \
      "$(_looptrace_options "$prog" "$sub") $(_looptrace_options "$prog")" \
      -- "$cur")
    return
  fi
  case $sub in
    check)
      _looptrace_profiles "$prog" "$cur"
      ;;
    report | list)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      ;;
  esac
}

complete -F _looptrace looptrace
