// Which index answers a query (issue 17): mongo-java-server asks its indexes in creation order and
// takes the first whose canHandle accepts the query, and its unique indexes accept only a query on
// exactly their keys. Here every index is considered: a unique index whose keys all have a plain
// value in the query (the query may have more fields: {_id, organization_id} uses the _id index),
// then the secondary index that bounds the most keys (SecondaryIndex.boundsFor). The candidates are
// read in the collection's natural order, so that a query answers the same documents in the same
// order with or without indexes; the collection then filters them with the whole query.

import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.bson.Document;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

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
        int bestScore = 0;
        for (Index<P> index : indexes) {
            if (index instanceof SecondaryIndex) {
                SecondaryIndex.Bounds bounds = ((SecondaryIndex<P>) index).boundsFor(query);
                if (bounds != null && bounds.score() > bestScore) {
                    best = index;
                    bestQuery = query;
                    bestScore = bounds.score();
                }
            } else if (index.isUnique()) {
                Document projected = projectOnKeys(index, query);
                // A unique index on equality of all its keys: at most one candidate (or one per $in value).
                int score = 1000 + index.getKeys().size();
                if (projected != null && score > bestScore && index.canHandle(projected)) {
                    best = index;
                    bestQuery = projected;
                    bestScore = score;
                }
            }
        }
        if (best == null) {
            return null;
        }
        List<P> positions = new ArrayList<>();
        for (P position : best.getPositions(bestQuery)) {
            if (position != null) {
                positions.add(position);
            }
        }
        positions.sort(naturalOrder);
        return positions;
    }

    /** The query's conditions on the index's keys, when each is a plain value; null otherwise. */
    private static <P> Document projectOnKeys(Index<P> index, Document query) {
        Document projected = new Document();
        for (IndexKey key : index.getKeys()) {
            Object value = query.get(key.getKey());
            if (!query.containsKey(key.getKey()) || !SecondaryIndex.isPlainValue(value)) {
                return null;
            }
            projected.put(key.getKey(), value);
        }
        return projected;
    }
}
