// pause holds a pod sandbox's namespaces: it sleeps until SIGTERM/SIGINT and
// reaps children it inherits (it is PID 1 of the sandbox).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped at build time (-X main.version=...) so a cached binary can be checked.
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-version" {
		fmt.Println("pause", version)
		return
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
