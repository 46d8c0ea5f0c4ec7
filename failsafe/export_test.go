package failsafe

// PartitionOf returns the index of key's partition in g, for tests that
// need two keys in different partitions.
func PartitionOf(g *Group, key string) int {
	b := g.part(g.hash(key))
	for i := range g.parts {
		if &g.parts[i] == b {
			return i
		}
	}
	return -1
}
