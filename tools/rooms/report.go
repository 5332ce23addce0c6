package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// report prints one row per package and a total.
func report(w io.Writer, rooms []room, showEdges bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tfiles\tfile edges\tback up\tlargest cycle\tlongest function\tlines")
	var files, edges, backUp, longest int
	longestName := ""
	for _, r := range rooms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\n", r.path, r.files, r.edges, r.backUp, r.largestSCC, r.longestFunc, r.longest)
		files += r.files
		edges += r.edges
		backUp += r.backUp
		if r.longest > longest {
			longest, longestName = r.longest, r.longestFunc
		}
	}
	fmt.Fprintf(tw, "TOTAL %d packages\t%d\t%d\t%d\t\t%s\t%d\n", len(rooms), files, edges, backUp, longestName, longest)
	tw.Flush()
	if !showEdges {
		return
	}
	for _, r := range rooms {
		for _, e := range r.upEdges {
			fmt.Fprintf(w, "%s: %s\n", r.path, e)
		}
	}
}
