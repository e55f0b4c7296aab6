package main

// inProcessEnv is the environment of a command run in this process (run or
// dispatch) on the store in dir: never through a server, and with JSON
// output when json is set.
func inProcessEnv(dir string, json bool) func(string) string {
	return func(k string) string {
		switch k {
		case "SWARMOPS_STORE":
			return dir
		case "SWARMOPS_JSON":
			if json {
				return "1"
			}
		case serverModeEnv:
			return modeOff
		}
		return ""
	}
}

// storeEnv is an environment that names the store in dir and nothing else,
// so the server mode is the default: through a server when one runs.
func storeEnv(dir string) func(string) string {
	return func(k string) string {
		if k == "SWARMOPS_STORE" {
			return dir
		}
		return ""
	}
}
