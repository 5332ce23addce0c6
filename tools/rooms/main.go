// Command rooms prints the house picture of Go packages: how many
// packages (rooms) a tree holds, how many references inside each package
// run back up between its files, and the longest function.
//
// A file A refers to a file B of its own package when A uses a symbol
// (a package-level name, a method or a field) declared in B. A reference
// runs back up when A and B lie on one cycle of that file graph (one
// strongly connected component): no order of the files lets a reader meet
// every file after the files it needs, so somewhere a file reaches above
// itself. The metric counts distinct file-to-file edges on cycles; zero
// means the files of the package can be read bottom-up.
//
// Usage, from the repository root:
//
//	go run ./tools/rooms ./extauthz/... ./bridge/...
//	go run ./tools/rooms -edges ./extauthz/
//
// It type-checks from the export data `go list -export` leaves in the build
// cache, so it needs only the Go toolchain.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	edges := flag.Bool("edges", false, "print each back-up file-to-file edge")
	flag.Parse()
	if err := run(os.Stdout, flag.Args(), *edges); err != nil {
		fmt.Fprintln(os.Stderr, "rooms:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, patterns []string, showEdges bool) error {
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	rooms, err := measureAll(patterns)
	if err != nil {
		return err
	}
	report(w, rooms, showEdges)
	return nil
}

// measureAll measures every package the patterns name (not their
// dependencies).
func measureAll(patterns []string) ([]room, error) {
	pkgs, err := goList(patterns)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	var rooms []room
	for _, p := range pkgs {
		if p.DepOnly || len(p.GoFiles) == 0 {
			continue
		}
		r, err := measure(p, exports)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.ImportPath, err)
		}
		rooms = append(rooms, r)
	}
	return rooms, nil
}

func goList(patterns []string) ([]listed, error) {
	args := append([]string{"list", "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,DepOnly,Name"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
