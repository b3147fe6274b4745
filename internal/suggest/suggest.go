// Package suggest finds the names nearest to a mistyped one, for the
// "did you mean" of the sessionlog command (an unknown command, an
// unknown flag).
package suggest

// Near returns the candidates nearest to name when they are within limit
// edits of it (Distance), in the order of candidates; none when no
// candidate is that close.
func Near(name string, candidates []string, limit int) []string {
	type near struct {
		name string
		d    int
	}
	var found []near
	for _, c := range candidates {
		if d := Distance(name, c); d <= limit {
			found = append(found, near{c, d})
		}
	}
	best := limit
	for _, f := range found {
		best = min(best, f.d)
	}
	var out []string
	for _, f := range found {
		if f.d == best {
			out = append(out, f.name)
		}
	}
	return out
}

// Distance is the optimal string alignment distance of a and b (bytes):
// insertions, deletions, substitutions and swaps of two adjacent letters
// ("shwo" is one edit from "show").
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
