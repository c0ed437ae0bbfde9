// The count of the MongoDB driver's countDocuments (an aggregate of $match, maybe $skip and
// $limit, then {$group: {_id: 1, n: {$sum: 1}}}) answered through the collection's query planner
// (issue 17): mongo-java-server runs every aggregation over all the collection's documents, so
// every paginated list's total (X-Total-Count) would scan the collection. Any other pipeline goes
// to mongo-java-server as before.

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.bson.Document;

import java.util.List;
import java.util.function.Function;

final class CountPipeline {

    private CountPipeline() {
    }

    /** The aggregate command's answer when it is a countDocuments; null otherwise. */
    static Document answer(String command, Document query, Function<String, MongoCollection<?>> collections,
                           Function<String, String> namespace) {
        if (!QueryPlanner.ENABLED || !"aggregate".equalsIgnoreCase(command) || !(query.get("pipeline") instanceof List)) {
            return null;
        }
        List<?> pipeline = (List<?>) query.get("pipeline");
        if (pipeline.size() < 2 || pipeline.size() > 4 || !(query.get(command) instanceof String)) {
            return null;
        }
        Document match = stage(pipeline.get(0), "$match");
        Document group = stage(pipeline.get(pipeline.size() - 1), "$group");
        if (match == null || group == null || !isCountGroup(group)) {
            return null;
        }
        // The driver's shape only: at most one $skip, then at most one $limit (a $limit before a
        // $skip, or two of either, is not count(query, skip, limit)).
        int skip = 0;
        int limit = 0;
        int next = 1;
        if (next < pipeline.size() - 1 && numberStage(pipeline.get(next), "$skip") != null) {
            skip = numberStage(pipeline.get(next++), "$skip").intValue();
        }
        if (next < pipeline.size() - 1 && numberStage(pipeline.get(next), "$limit") != null) {
            limit = numberStage(pipeline.get(next++), "$limit").intValue();
        }
        if (next != pipeline.size() - 1) {
            return null;
        }
        String collectionName = (String) query.get(command);
        MongoCollection<?> collection = collections.apply(collectionName);
        int count = collection == null ? 0 : collection.count(match, skip, limit);
        Document cursor = new Document();
        cursor.put("id", 0L);
        cursor.put("ns", namespace.apply(collectionName));
        cursor.put("firstBatch", count == 0 ? List.of() : List.of(new Document("_id", group.get("_id")).append("n", count)));
        Document response = new Document("cursor", cursor);
        response.put("ok", 1.0);
        return response;
    }

    /** The number of a {$skip: n} or {$limit: n} stage, or null. */
    private static Number numberStage(Object stage, String name) {
        return stage instanceof Document && ((Document) stage).size() == 1 && ((Document) stage).get(name) instanceof Number
            ? (Number) ((Document) stage).get(name) : null;
    }

    private static Document stage(Object stage, String name) {
        if (!(stage instanceof Document) || ((Document) stage).size() != 1 || !(((Document) stage).get(name) instanceof Document)) {
            return null;
        }
        return (Document) ((Document) stage).get(name);
    }

    /** {_id: <a constant>, n: {$sum: 1}} (the driver's is _id: 1). */
    private static boolean isCountGroup(Document group) {
        if (group.size() != 2 || !group.containsKey("_id") || !(group.get("n") instanceof Document)) {
            return false;
        }
        Object id = group.get("_id");
        if (id instanceof String && ((String) id).startsWith("$") || id instanceof Document) {
            return false;
        }
        Document n = (Document) group.get("n");
        return n.size() == 1 && n.get("$sum") instanceof Number && ((Number) n.get("$sum")).intValue() == 1;
    }
}
