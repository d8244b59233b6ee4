@PER-1B @requires-periodic-tasks
Feature: Periodic 02 - Task handlers

  The broker's task infrastructure creates up to 2 x the number of CPUs
  task handlers to run its async tasks. They start with the SQL engine and
  always run; on every notification, any handler that failed to start is
  restarted. In the topology "periodic" sql1 has 2 CPUs, sql2 one.

  Scenario: [1] Twice as many task handlers as CPUs start with the engine
    Given the topology "periodic"
    Then the log shows exactly:
      | second | event                 | instance | count |
      | 0      | task handlers started | sql1     | 4     |
      | 0      | task handlers started | sql2     | 2     |
      | 0      | task handlers started | sql5     | 2     |
    And "sql1" has 4 running task handlers

  Scenario: [2] Handlers that failed are restarted by the next notification
    Given the topology "periodic"
    And time passes to second 7
    And 3 task handlers of "sql1" fail
    When time passes to second 10
    Then the log shows exactly:
      | second | event                   | instance | count |
      | 7      | task handlers failed    | sql1     | 3     |
      | 10     | task handlers restarted | sql1     | 3     |
    And "sql1" has 4 running task handlers

  Scenario: [3] Until that notification they stay down
    Given the topology "periodic"
    And time passes to second 6
    And 3 task handlers of "sql1" fail
    When time passes to second 9
    Then "sql1" has 1 running task handlers
    And the log has no "task handlers restarted" event

  Scenario: [4] Three CPUs give six task handlers, not more
    Given the topology:
      """
      instances:
        sql1:
          cpus: 3
          databases: {shop: {}}
      """
    Then the log shows exactly:
      | second | event                 | instance | count |
      | 0      | task handlers started | sql1     | 6     |
    And "sql1" has 6 running task handlers
