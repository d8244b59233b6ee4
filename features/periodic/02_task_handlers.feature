@PER-1B @requires-periodic-tasks
Feature: Periodic 02 - Task handlers

  The broker's task infrastructure "creates up to 2 times the number of
  CPU's task-handlers" to run its async tasks: at least one, and never more
  than twice the CPUs; how many within that the documents leave open. They
  start with the SQL engine and always run; on every notification, any
  handler that failed to start is restarted. In the topology "periodic" sql1
  has 2 CPUs, sql2 and sql5 one.

  Failing handlers is the kit's own fault: the kit knows when it made them
  fail, so a broker is not asked to report it.

  Scenario: [1] Up to twice as many task handlers as CPUs start with the engine
    Given the topology "periodic"
    Then the log shows exactly:
      | second | event                 | instance | count            |
      | 0      | task handlers started | sql1     | 1 or 2 or 3 or 4 |
      | 0      | task handlers started | sql2     | 1 or 2           |
      | 0      | task handlers started | sql5     | 1 or 2           |
    And "sql1" has all of its task handlers running

  Scenario: [2] Handlers that failed are restarted by the next notification
    Given the topology "periodic"
    And time passes to second 7
    And 1 task handler of "sql1" fails
    When time passes to second 10
    Then the log shows exactly:
      | second | event                   | instance | count |
      | 10     | task handlers restarted | sql1     | 1     |
    And "sql1" has all of its task handlers running

  Scenario: [3] Until that notification they stay down
    Given the topology "periodic"
    And time passes to second 6
    And 1 task handler of "sql1" fails
    When time passes to second 9.999
    Then "sql1" has all but 1 of its task handlers running
    And the log has no "task handlers restarted" event

  Scenario: [4] Three CPUs give six task handlers at most
    Given the topology:
      """
      instances:
        sql1:
          cpus: 3
          databases: {shop: {}}
      """
    Then the log shows exactly:
      | second | event                 | instance | count                       |
      | 0      | task handlers started | sql1     | 1 or 2 or 3 or 4 or 5 or 6 |
    And "sql1" has all of its task handlers running

  Scenario: [5] A second failure after a restart is restarted by the notification after it
    Given the topology "periodic"
    And time passes to second 12
    And 1 task handler of "sql1" fails
    And time passes to second 16
    And 1 task handler of "sql1" fails
    When time passes to second 20
    Then "sql1" has all of its task handlers running
    And the log shows exactly:
      | second | event                   | instance | count |
      | 15     | task handlers restarted | sql1     | 1     |
      | 20     | task handlers restarted | sql1     | 1     |

  # "On every notification, the task infrastructure checks if any task-handler failed to start and restarts it if
  # required" (periodic tasks, every notification): the work a message brings in between does not restart them
  # sooner, on the instance that sends it or on the one it goes to
  @requires-routing
  Scenario: [6] A message sent while task handlers are down restarts none of them before the next notification
    Given the topology "periodic"
    And dialog "D1" is begun from service "Initiator" to service "Target"
    And time passes to second 6
    And 1 task handler of "sql1" fails
    And time passes to second 7
    And 1 task handler of "sql2" fails
    And time passes to second 8
    And a message is sent on dialog "D1"
    When time passes to second 20
    Then the log shows exactly:
      | second | event                   | instance | count |
      | 10     | task handlers restarted | sql1     | 1     |
      | 10     | task handlers restarted | sql2     | 1     |
    And "sql1" has all of its task handlers running
    And "sql2" has all of its task handlers running
    And the log for dialog "D1" at "sql2" has 1 "message arrived" event

  # The broker "first runs everything that fell due up to that time ... and then applies the command"
  # (docs/protocol.md, execute): a handler that fails at second 10 fails after that instant's notification ran,
  # and waits for the next one; one that fails a millisecond before is restarted by it
  Scenario: [7] A handler that fails at the instant of a notification is restarted by the next one; one that fails just before, by that one
    Given the topology "periodic"
    And time passes to second 9.999
    And 1 task handler of "sql2" fails
    And time passes to second 10
    And 1 task handler of "sql1" fails
    When time passes to second 15
    Then the log shows exactly:
      | second | event                   | instance | count |
      | 10     | task handlers restarted | sql2     | 1     |
      | 15     | task handlers restarted | sql1     | 1     |
    And "sql1" has all of its task handlers running
