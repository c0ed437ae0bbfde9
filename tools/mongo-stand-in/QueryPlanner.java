// Which index answers a query (issue 17): mongo-java-server asks its indexes in creation order and
// takes the first whose canHandle accepts the query, and its unique indexes accept only a query on
// exactly their keys. Here every index is considered: a unique index whose keys all have a plain
// value in the query (the query may have more fields: {_id, organization_id} uses the _id index),
// then the secondary index that bounds the most keys (SecondaryIndex.boundsFor) or the compound
// unique index with the longest prefix (TupleUniqueIndex.prefixes: equality, then maybe $in). The candidates are
// read in the collection's natural order, so that a query answers the same documents in the same
// order with or without indexes; the collection then filters them with the whole query.

import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.bson.Document;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

final class QueryPlanner {

    private QueryPlanner() {
    }

    /** Indexes can be turned off (STAND_IN_INDEXES=off) to compare answers with and without them. */
    static final boolean ENABLED = !"off".equals(System.getenv("STAND_IN_INDEXES"));

    /** The candidate positions of a query in natural order, or null when no index helps (scan). */
    static <P> List<P> candidates(List<Index<P>> indexes, Document query, Comparator<P> naturalOrder) {
        if (!ENABLED || query == null || query.isEmpty()) {
            return null;
        }
        Index<P> best = null;
        Document bestQuery = null;
        TupleUniqueIndex.Prefixes bestPrefixes = null;
        int bestScore = 0;
        for (Index<P> index : indexes) {
            if (index instanceof SecondaryIndex) {
                SecondaryIndex.Bounds bounds = ((SecondaryIndex<P>) index).boundsFor(query);
                if (bounds != null && bounds.score() > bestScore) {
                    best = index;
                    bestQuery = query;
                    bestPrefixes = null;
                    bestScore = bounds.score();
                }
            } else if (index.isUnique()) {
                Document projected = projectOnKeys(index, query);
                // A unique index on equality of all its keys: at most one candidate (or one per $in value).
                int score = 1000 + index.getKeys().size();
                if (projected != null && score > bestScore && index.canHandle(projected)) {
                    best = index;
                    bestQuery = projected;
                    bestPrefixes = null;
                    bestScore = score;
                }
                // Equality (then maybe a $in) on its first keys only: ranges of it, scored as a secondary index's prefix.
                TupleUniqueIndex.Prefixes prefixes = index instanceof TupleUniqueIndex ? ((TupleUniqueIndex) index).prefixes(query) : null;
                if (prefixes != null && 2 * prefixes.length() > bestScore) {
                    best = index;
                    bestQuery = null;
                    bestPrefixes = prefixes;
                    bestScore = 2 * prefixes.length();
                }
            }
        }
        if (best == null) {
            return null;
        }
        @SuppressWarnings("unchecked")
        Iterable<P> found = bestPrefixes != null
            ? (Iterable<P>) ((TupleUniqueIndex) best).positionsWithPrefixes(bestPrefixes)
            : best.getPositions(bestQuery);
        List<P> positions = new ArrayList<>();
        for (P position : found) {
            if (position != null) {
                positions.add(position);
            }
        }
        positions.sort(naturalOrder);
        return positions;
    }

    /**
     * For a sorted query with a limit: the candidates read in the order of an index that follows the
     * sort (the keys after its equality prefix are the sort's fields, all ascending or all
     * descending), until `needed` (skip + limit) of them match the query, and then every entry tied
     * with the last one on the sort fields, so that the collection's own sort of these candidates
     * (stable, over the natural order) picks the same documents as after a scan. Null when no index
     * follows the sort.
     */
    static <P> List<P> orderedCandidates(List<Index<P>> indexes, Document query, Document orderBy, int needed,
                                         Comparator<P> naturalOrder, Predicate<P> matches) {
        if (!ENABLED || orderBy == null || orderBy.isEmpty() || needed <= 0 || orderBy.containsKey("$natural")) {
            return null;
        }
        List<String> sortFields = new ArrayList<>(orderBy.keySet());
        int direction = 0;
        for (Object value : orderBy.values()) {
            int d = value instanceof Number && ((Number) value).doubleValue() < 0 ? -1 : 1;
            if (direction != 0 && d != direction) {
                return null;
            }
            direction = d;
        }
        SecondaryIndex<P> best = null;
        SecondaryIndex.Bounds bestBounds = null;
        Iterator<Map.Entry<Object[], Object>> entries = null;
        for (Index<P> index : indexes) {
            if (!(index instanceof SecondaryIndex)) {
                continue;
            }
            SecondaryIndex<P> secondary = (SecondaryIndex<P>) index;
            SecondaryIndex.Bounds bounds = query == null || query.isEmpty() ? new SecondaryIndex.Bounds() : secondary.boundsFor(query);
            if (bounds == null) {
                bounds = new SecondaryIndex.Bounds();
            }
            if (best != null && bounds.score() <= bestBounds.score()) {
                continue;
            }
            var iterator = secondary.orderedEntries(bounds, direction < 0, sortFields);
            if (iterator != null) {
                best = secondary;
                bestBounds = bounds;
                entries = iterator;
            }
        }
        // An index that bounds the query better (a unique one, a longer equality prefix) reads fewer documents, sorted or not.
        if (entries == null || bestBounds.score() < bestScore(indexes, query)) {
            return null;
        }
        List<P> positions = new ArrayList<>();
        int found = 0;
        List<Object> lastSortKey = null;
        int first = bestBounds.prefix.size();
        while (entries.hasNext()) {
            var entry = entries.next();
            List<Object> sortKey = new ArrayList<>();
            for (int i = first; i < first + sortFields.size(); i++) {
                sortKey.add(entry.getKey()[i]);
            }
            if (found >= needed && !sameValues(sortKey, lastSortKey)) {
                break;
            }
            for (P position : SecondaryIndex.<P>positionsOf(entry.getValue())) {
                if (matches.test(position)) {
                    positions.add(position);
                    found++;
                    lastSortKey = sortKey;
                }
            }
        }
        // In natural order: the collection's stable sort then breaks ties as it does after a scan.
        positions.sort(naturalOrder);
        return positions;
    }

    private static <P> int bestScore(List<Index<P>> indexes, Document query) {
        int best = 0;
        if (query == null || query.isEmpty()) {
            return best;
        }
        for (Index<P> index : indexes) {
            if (index instanceof SecondaryIndex) {
                SecondaryIndex.Bounds bounds = ((SecondaryIndex<P>) index).boundsFor(query);
                if (bounds != null) {
                    best = Math.max(best, bounds.score());
                }
            } else if (index.isUnique()) {
                Document projected = projectOnKeys(index, query);
                if (projected != null && index.canHandle(projected)) {
                    best = Math.max(best, 1000 + index.getKeys().size());
                }
                TupleUniqueIndex.Prefixes prefixes = index instanceof TupleUniqueIndex ? ((TupleUniqueIndex) index).prefixes(query) : null;
                if (prefixes != null) {
                    best = Math.max(best, 2 * prefixes.length());
                }
            }
        }
        return best;
    }

    private static boolean sameValues(List<Object> a, List<Object> b) {
        if (a == null || b == null || a.size() != b.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (ValueComparator.asc().compare(a.get(i), b.get(i)) != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * The query's conditions on the index's keys, when each is a plain value, or for the _id index
     * a $in of plain values (`{_id: {$in: [...]}, organization_id: ...}`: mongo-java-server's unique
     * index looks each value up; an _id is never an array, so each document has one key); null
     * otherwise.
     */
    private static <P> Document projectOnKeys(Index<P> index, Document query) {
        Document projected = new Document();
        for (IndexKey key : index.getKeys()) {
            Object value = query.get(key.getKey());
            boolean usable = SecondaryIndex.isPlainValue(value) || (isIdIndex(index) && SecondaryIndex.plainInValues(value) != null);
            if (!query.containsKey(key.getKey()) || !usable) {
                return null;
            }
            projected.put(key.getKey(), value);
        }
        return projected;
    }

    private static <P> boolean isIdIndex(Index<P> index) {
        return index.getKeys().size() == 1 && "_id".equals(index.getKeys().get(0).getKey());
    }
}
